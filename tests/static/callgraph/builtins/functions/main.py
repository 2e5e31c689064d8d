def f():
    return abs(-1) + max(1, 2)


n = len([1, 2])
for i in range(n):
    print(i)
f()
