"""Modules shared by the scripts of tools/<job>/ (safetensors_io: the hand-written safetensors
writer and reader). A script reaches them with the one path bootstrap it opens with:

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tools/

after which `lib`, `golden`, `serve`, `recipes`, ... import as packages (see tools/README.md).
"""
