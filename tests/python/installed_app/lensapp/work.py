def build():
    return bytearray(6_000_000)  # @app_block
