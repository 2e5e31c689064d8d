"""What a FlyDSL trace is keyed by and reads, and the words for a miss.

Contract: the parts of a launcher's key, each a pure function of the call or a live read
(no persistence, no launcher): :mod:`.argsig` (what each argument specializes),
:mod:`.binder` (a call's arguments as one tuple, without ``inspect``), :mod:`.target`
(resolved GPU target and device id), :mod:`.envkey` (the code-generation environment,
re-read live), :mod:`.debuginfo` (whether the IR embeds source positions). What a trace
reads that the key cannot predict is declared as derived reads: :mod:`.statequery` (torch
flags, logging levels) and :mod:`.devprops` (device properties). :mod:`.explain` turns a
key difference into recompile reasons on one logger.
"""
