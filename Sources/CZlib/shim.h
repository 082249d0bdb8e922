// The system zlib (Debian: zlib1g-dev), found through pkg-config: gzip for OTLP request bodies.
#include <zlib.h>
