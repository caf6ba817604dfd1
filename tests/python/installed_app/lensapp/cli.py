from lensapp import work


def main():
    block = work.build()
    print(len(block))
    return 0
