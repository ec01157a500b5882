/* The floor of a blocking client (docs/BENCHMARKS.md, "late night"): N
 * threads, each with its own connection, run sysbench's point select
 * through Connector/C prepared statements and do nothing else -- sysbench
 * without its Lua. Prints the statements run and their rate.
 *
 *   apt-get install libmariadb-dev
 *   gcc -O2 -o /tmp/blocking_floor bench/blocking_floor.c $(mariadb_config --cflags --libs) -lpthread
 *   /usr/bin/time -f "%U %S" /tmp/blocking_floor PORT 8 10      # user sbtest/sbtest, db sbtest, 4 x 100k rows
 */
#include <mysql.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int port, seconds;
static volatile int stop;
static long counts[64];

static void *worker(void *arg) {
    long idx = (long)arg;
    MYSQL *m = mysql_init(NULL);
    if (!mysql_real_connect(m, "127.0.0.1", "sbtest", "sbtest", "sbtest", port, NULL, 0)) {
        fprintf(stderr, "connect: %s\n", mysql_error(m)); exit(1);
    }
    MYSQL_STMT *st[4];
    for (int t = 0; t < 4; t++) {
        char q[64]; snprintf(q, sizeof q, "SELECT c FROM sbtest%d WHERE id=?", t + 1);
        st[t] = mysql_stmt_init(m);
        if (mysql_stmt_prepare(st[t], q, strlen(q))) { fprintf(stderr, "prepare: %s\n", mysql_stmt_error(st[t])); exit(1); }
    }
    int id; MYSQL_BIND p; memset(&p, 0, sizeof p);
    p.buffer_type = MYSQL_TYPE_LONG; p.buffer = &id;
    char c[128]; unsigned long clen; MYSQL_BIND r; memset(&r, 0, sizeof r);
    r.buffer_type = MYSQL_TYPE_STRING; r.buffer = c; r.buffer_length = sizeof c; r.length = &clen;
    for (int t = 0; t < 4; t++) { mysql_stmt_bind_param(st[t], &p); mysql_stmt_bind_result(st[t], &r); }
    unsigned seed = 12345 + idx; long n = 0;
    while (!stop) {
        int t = rand_r(&seed) % 4; id = 1 + rand_r(&seed) % 100000;
        if (mysql_stmt_execute(st[t])) { fprintf(stderr, "execute: %s\n", mysql_stmt_error(st[t])); exit(1); }
        while (mysql_stmt_fetch(st[t]) == 0) {}
        mysql_stmt_free_result(st[t]);
        n++;
    }
    counts[idx] = n;
    mysql_close(m);
    return NULL;
}

int main(int argc, char **argv) {
    port = atoi(argv[1]); int threads = atoi(argv[2]); seconds = atoi(argv[3]);
    mysql_library_init(0, NULL, NULL);
    pthread_t th[64];
    for (long i = 0; i < threads; i++) pthread_create(&th[i], NULL, worker, (void *)i);
    sleep(seconds); stop = 1;
    long total = 0;
    for (int i = 0; i < threads; i++) { pthread_join(th[i], NULL); total += counts[i]; }
    printf("%ld %.1f\n", total, (double)total / seconds);
    return 0;
}
