#include <cstdio>
int main() { std::puts("bulkhead: under construction"); return 0; }
