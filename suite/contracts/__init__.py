"""What crosses a process boundary, in one place: the exit codes of every command and of the suite's
own child processes (`exitcodes`), the reader of `eval --json` (`evaljson`), the reader of trace
files (`traces`) and of the YAML files a person writes for the suite (`yamlfile`: question banks,
head-to-head protocols). Nothing here imports the rest of the suite, so every
part may use it, and a reader of a file needs nothing from the part that writes it.
"""
