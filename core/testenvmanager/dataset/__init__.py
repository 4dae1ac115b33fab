"""Dataset resolution (index, data, data_info) and streamed parsers per format."""
