"""Test case controller: builds test cases from the algorithm grid, runs paradigms and metrics."""
