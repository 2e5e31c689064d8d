"""The static call graph: who calls what in a project, in PyCG's terms, from source alone.

Contract. Input: the flow facts of each module (:class:`~flydeps.static.calls.facts.FlowFacts`,
made by :func:`~flydeps.static.calls.collect.flow_facts`, a pure function of the file's
bytes, and cached per file content by the parse cache, :mod:`flydeps.static.parse`, under a
digest of :data:`~flydeps.static.calls.collect.EXTRACTOR_MODULES`), loaded on demand, and
the project's symbol tables (:class:`~flydeps.static.symbols.Index`). Output: a read-only
:class:`~flydeps.static.calls.result.CallGraph`
(:func:`~flydeps.static.calls.solve.build_call_graph`), kept in the result cache in its
stored form (:mod:`flydeps.static.calls.store`) and printed by :mod:`flydeps.static.report`.
Nothing here imports or runs the analysed code, and the call graph never changes the
dependency graph nor any digest.

The solver's parts compose, none inherits from another: the solver owns a flow state (the
abstract store and the work list) and a semantics over that state (how each fact changes
it, what each expression holds), and drives the two to a fixed point.

This ``__init__`` imports nothing; import the module you need. The modules, in data-flow order:

* :mod:`~flydeps.static.calls.scopes` -- scope pre-pass: each scope's locals, ``global``/``nonlocal``;
* :mod:`~flydeps.static.calls.exprs` -- expression walk: numbered expressions, names resolved;
* :mod:`~flydeps.static.calls.collect` -- statement walk: one module's AST -> its flow facts;
* :mod:`~flydeps.static.calls.facts` -- the flow facts (slots, expressions, facts), their stored shape;
* :mod:`~flydeps.static.calls.state` -- the flow state: slots and values, loaded modules, work list;
* :mod:`~flydeps.static.calls.semantics` -- the rules: each fact and expression over a flow state;
* :mod:`~flydeps.static.calls.solve` -- the solver: state + semantics to a fixed point -> CallGraph;
* :mod:`~flydeps.static.calls.result` -- the CallGraph, its PyCG names, the bound diagnostics;
* :mod:`~flydeps.static.calls.store` -- the CallGraph's stored (JSON) form for the result cache.
"""
