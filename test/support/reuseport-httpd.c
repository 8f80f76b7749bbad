/*
 * A minimal HTTP responder for the real-container tests (test/support/podman-target.ts):
 *
 *   reuseport-httpd ADDR PORT STATUS BODY
 *
 * listens on ADDR:PORT with SO_REUSEPORT and answers every request with STATUS (e.g. 200) and
 * BODY. Two of them can hold the same port of one network namespace at once, as a server built
 * for zero-downtime restarts under host networking does (the kernel spreads connections over
 * both): the old container keeps answering while the new one starts. Exits 0 on TERM (it runs as
 * a container's PID 1, which ignores a signal it has no handler for), 1 when it cannot listen.
 * Built statically (gcc -static) so that it runs in a busybox-only image.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void on_term(int sig) {
  (void)sig;
  _exit(0);
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: reuseport-httpd ADDR PORT STATUS BODY\n");
    return 2;
  }
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  signal(SIGPIPE, SIG_IGN);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
  struct sockaddr_in sa;
  memset(&sa, 0, sizeof sa);
  sa.sin_family = AF_INET;
  sa.sin_port = htons((unsigned short)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
    fprintf(stderr, "reuseport-httpd: bad address %s\n", argv[1]);
    return 2;
  }
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 64) != 0) {
    perror("reuseport-httpd: listen");
    return 1;
  }
  fprintf(stderr, "reuseport-httpd: listening on %s:%s\n", argv[1], argv[2]);
  char head[256];
  int hl = snprintf(head, sizeof head,
                    "HTTP/1.0 %s X\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
                    "Connection: close\r\n\r\n",
                    argv[3], strlen(argv[4]) + 1);
  char req[4096];
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) continue;
    /* One read is enough for a probe's GET; the answer does not depend on it. */
    (void)read(c, req, sizeof req);
    (void)write(c, head, (size_t)hl);
    (void)write(c, argv[4], strlen(argv[4]));
    (void)write(c, "\n", 1);
    close(c);
  }
}
