# Held-out (issue 37, written after tuning): bound methods and classes handed to builtins.
class Point:
    def __init__(self, x):
        self.x = x


class Ranking:
    def __init__(self, weights):
        self.weights = weights

    def score(self, p):
        return self.weights * p.x

    def best(self, points):
        return min(points, key=self.score)


points = list(map(Point, [3, 1, 2]))
print(Ranking(2).best(points).x)
