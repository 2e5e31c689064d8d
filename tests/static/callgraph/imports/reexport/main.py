import pkg
from pkg import s

s()
pkg.s()
