"""Ahead-of-time builds: compile specializations for several arches into one directory.

Contract: :mod:`.build` drives real launchers (local worker processes or a Dask cluster)
over a list of specializations and writes a shippable directory with its persistent
index; unchanged entries are skipped, a failed one is reported with its reason and the
rest still build. :mod:`.archprobe` asks FlyDSL's compiler whether it knows a GPU
processor name. :mod:`.record` is ``flydeps aot record`` and ``flydeps aot merge`` (a
command run with ``FLYDEPS_RECORD`` set; manifests united, checked line by line);
:mod:`.plan` is ``flydeps aot plan``: which entries of a manifest a built directory holds
and which the working tree, or the commits since a revision, invalidate, from static
digests and the index only (nothing traced, compiled or imported), against the source
snapshot :mod:`.sources` (written by the build into its directory: what the rows were
built on). Above the launcher; the
CLI (``flydeps aot``) is its entry point.
"""
