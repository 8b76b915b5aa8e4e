"""`python -m cudnn COMMAND ...`: the command line (cudnn.cli.main)."""

from cudnn.cli.main import run

if __name__ == "__main__":
    run()
