import collections
import json


def encode(pairs):
    table = collections.OrderedDict(pairs)
    return json.dumps(table)


encode([("a", 1)])
