"""Command line: ``ianvs -f job.yaml`` (benchmarking), the job config and the run loop."""
