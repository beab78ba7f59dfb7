// An empty file: the target that builds the tests' precompiled header (tests/CMakeLists.txt).
