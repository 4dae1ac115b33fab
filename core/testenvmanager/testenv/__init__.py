"""The testenv YAML: dataset, metrics and sandbox settings as typed config."""
