# A script of the user's that calls an installed package: the package stays a library.
from lensapp import work


def main():
    block = work.build()  # @calls_lensapp
    print(len(block))


main()
