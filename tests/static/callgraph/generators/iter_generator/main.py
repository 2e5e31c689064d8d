class Bag:
    def __init__(self, items):
        self.items = items

    def __iter__(self):
        for item in self.items:
            yield item


def first(bag):
    for item in bag:
        return item


first(Bag([1, 2]))
