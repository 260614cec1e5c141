// The system's SQLite (apt libsqlite3-dev), for the queue's store on Linux; Apple platforms have the SQLite3 module.
#include <sqlite3.h>
