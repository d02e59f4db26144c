"""The evaluator: inputs -> reference -> check -> time, run in an isolated child process."""
