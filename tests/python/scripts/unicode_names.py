# A function whose name is not ASCII (two- and three-byte UTF-8): the hooks encode it themselves.
import os


def größe_日本():
    return bytearray(77_777)  # @named


kept = größe_日本()
os._exit(0)
