class Reducer:
    def total(self, n):
        return sum(range(n))

    def widest(self, rows):
        return max(len(r) for r in rows)


r = Reducer()
r.total(3)
r.widest([[1], [1, 2]])
