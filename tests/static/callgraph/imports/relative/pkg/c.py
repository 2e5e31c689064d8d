def leaf():
    pass
