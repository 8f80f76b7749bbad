/**
 * One raw HTTP/1.1 exchange over a socket, for tests of what a server answers before or while
 * a body arrives (body limits, `Expect: 100-continue`).
 */
import { connect, type Socket } from "node:net";

/**
 * Connects to 127.0.0.1:`port`, writes `head`, then lets `feed` write body bytes; resolves
 * with everything read (latin1) once the server closes. Rejects if the socket is still open
 * after 10 s. EPIPE/ECONNRESET once the server closes mid-body are not errors.
 */
export function rawExchange(
  port: number,
  head: string,
  feed: (s: Socket) => void = () => {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, "127.0.0.1");
    let got = "";
    const timer = setTimeout(() => {
      s.destroy();
      reject(new Error(`socket still open after 10 s; read so far: ${got.slice(0, 300)}`));
    }, 10_000);
    s.on("data", (d) => {
      got += d.toString("latin1");
    });
    s.on("error", () => {});
    s.on("close", () => {
      clearTimeout(timer);
      resolve(got);
    });
    s.write(head);
    feed(s);
  });
}
