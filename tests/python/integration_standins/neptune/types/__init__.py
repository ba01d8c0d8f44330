class File:
    def __init__(self, path):
        self.path = path
