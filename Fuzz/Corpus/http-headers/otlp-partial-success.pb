
too old