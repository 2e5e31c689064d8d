"""Ahead-of-time builds: compile specializations for several arches into one directory.

Contract: :mod:`.build` drives real launchers (local worker processes or a Dask cluster)
over a list of specializations and writes a shippable directory with its persistent
index; unchanged entries are skipped, a failed one is reported with its reason and the
rest still build. :mod:`.archprobe` asks FlyDSL's compiler whether it knows a GPU
processor name. Above the launcher; the CLI (``flydeps aot``) is its entry point.
"""
