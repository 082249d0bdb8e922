// The system liblz4 (Debian: liblz4-dev), found through pkg-config. Crumbs never vendors LZ4.
#include <lz4.h>
#include <lz4frame.h>
