from pkg.a import entry

entry()
