"""placeholder"""

def run(sizes, options):
    raise NotImplementedError
