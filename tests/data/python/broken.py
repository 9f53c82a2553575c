# -*- coding: utf-8 -*-
def f(:
    return "unterminated
class C(
    def g(self): pass
