from to_import import func as run

run()
