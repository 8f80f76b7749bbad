/**
 * A Postgres that stops answering without refusing connections (frozen, partitioned, a TCP
 * proxy that swallows bytes) makes the engine fail fast, not hang: connecting times out
 * (`connectTimeoutMs`), a query waiting for its answer times out (`queryTimeoutMs`), and
 * requests answer 503 with Retry-After while it lasts and 200 again after.
 */
import net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { PostgresStore } from "../../engine/src/adapters/postgres/postgres-store.ts";
import { type Harness, makeHarness, PG_URL, recipe } from "./service-harness.ts";

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c().catch(() => {});
});

/** A loopback TCP listener that accepts connections and never writes a byte. */
async function silentListener(): Promise<number> {
  const sockets = new Set<net.Socket>();
  const srv = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  closers.push(async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((r) => srv.close(() => r()));
  });
  return (srv.address() as net.AddressInfo).port;
}

/** A loopback TCP proxy to `target`; `freeze()` stops forwarding bytes both ways, `thaw()` resumes. */
async function freezableProxy(target: { host: string; port: number }) {
  let frozen = false;
  const pairs = new Set<[net.Socket, net.Socket]>();
  const srv = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    const pair: [net.Socket, net.Socket] = [client, upstream];
    pairs.add(pair);
    for (const s of pair) s.on("error", () => {});
    const pipe = (from: net.Socket, to: net.Socket) => {
      from.on("data", (b) => {
        if (!frozen) to.write(b);
      });
      from.on("close", () => {
        to.destroy();
        pairs.delete(pair);
      });
    };
    pipe(client, upstream);
    pipe(upstream, client);
  });
  await new Promise<void>((r) => srv.listen(0, "127.0.0.1", r));
  closers.push(async () => {
    for (const p of pairs) for (const s of p) s.destroy();
    await new Promise<void>((r) => srv.close(() => r()));
  });
  return {
    port: (srv.address() as net.AddressInfo).port,
    freeze: () => {
      frozen = true;
    },
    thaw: () => {
      frozen = false;
      // Connections that lost bytes while frozen are broken: drop them; the pool reconnects.
      for (const p of pairs) for (const s of p) s.destroy();
    },
  };
}

describe("a Postgres that does not answer", () => {
  it("connecting to a listener that never answers fails within connectTimeoutMs, naming the cause", async () => {
    const port = await silentListener();
    const store = new PostgresStore({
      connectionString: `postgres://baton:x@127.0.0.1:${port}/baton`,
      connectTimeoutMs: 500,
    });
    closers.push(() => store.close());
    const started = Date.now();
    const err = await store.migrate().then(
      () => null,
      (e: unknown) => e as Error,
    );
    expect(err).toBeInstanceOf(Error);
    expect(String(err?.message)).toMatch(/timeout/i);
    // Bounded: far below a hang (the test's own timeout would catch a hang anyway).
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it.skipIf(!PG_URL)(
    "a database frozen mid-service: requests answer 503 within queryTimeoutMs, then 200 after",
    async () => {
      const u = new URL(PG_URL!);
      const proxy = await freezableProxy({ host: u.hostname, port: Number(u.port || 5432) });
      u.hostname = "127.0.0.1";
      u.port = String(proxy.port);
      const schema = `unresp_${process.pid}_${Date.now() % 1e8}`;
      const store = new PostgresStore({
        connectionString: u.toString(),
        schema,
        connectTimeoutMs: 1_000,
        queryTimeoutMs: 1_000,
      });
      await store.migrate();
      const h: Harness = await makeHarness({ store, seed: recipe(2) });
      closers.push(() => h.close());
      expect((await h.engine.app.request("/healthz")).status).toBe(200);

      proxy.freeze();
      // A good probe is reused for a second (release-service health()); wait past it.
      await new Promise((r) => setTimeout(r, 1_100));
      const res = await h.engine.app.request("/healthz");
      expect(res.status).toBe(503);
      expect(res.headers.get("retry-after")).toBeTruthy();
      const list = await h.engine.app.request("/v1/releases", {
        headers: { authorization: `Bearer ${process.env.BATON_TEST_OPERATOR ?? ""}` },
      });
      expect([401, 503]).toContain(list.status);

      proxy.thaw();
      let status = 0;
      for (let i = 0; i < 20 && status !== 200; i++) {
        status = (await h.engine.app.request("/healthz")).status;
        if (status !== 200) await new Promise((r) => setTimeout(r, 250));
      }
      expect(status).toBe(200);
    },
  );
});
