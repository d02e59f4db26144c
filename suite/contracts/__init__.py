"""What crosses a process boundary, in one place: the exit codes of every command and of the suite's
own child processes (`exitcodes`), the reader of `eval --json` (`evaljson`) and the reader of trace
files (`traces`). Nothing here imports the rest of the suite except the layers below it, so every
part may use it, and a reader of a file needs nothing from the part that writes it.
"""
