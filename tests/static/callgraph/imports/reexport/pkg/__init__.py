from .sub import s as s
