"""Issue 35's oracle families: kernel packages written the way real kernel code is, one family
per way state reaches a trace, each case judged against FlyDSL's own IR key of a fresh plain
trace (in memory, at a fresh start from the persistent index, and in new processes).

``families.model`` (cases, verdicts), ``families.kernels`` (package sources),
``families.harness`` (the run), ``families.registry`` (families by name), one module per
family, and ``run.py`` (the table). See ``run.py`` for the commands.
"""
