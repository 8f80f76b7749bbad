/**
 * Live updates of a running release: a server-sent events stream that says "changed" when the
 * release's version or history grows, and a small script that then fetches the page again
 * and swaps the parts marked `data-part` (the retry model panel keeps its own state).
 * Without JavaScript the page carries a `<meta refresh>` inside `<noscript>` instead.
 */
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { TERMINAL_RELEASE_STATES } from "../../domain/states.ts";
import type { ReleaseApi, ReleaseRecord } from "../../service/api.ts";

/** Poll interval of the stream (ms) and its lifetime (ms); the browser reconnects after. */
export const LIVE_POLL_MS = 1000;
export const LIVE_MAX_MS = 10 * 60_000;

/**
 * What changes when a release moves or a refused event is recorded; the same string as
 * `ReleaseApi.liveMark` (version and history count).
 */
export function liveVersion(rec: ReleaseRecord): string {
  return `${rec.release.resource_version}:${rec.history.length}`;
}

/**
 * `GET /releases/:id/events?v=<liveVersion>`: emits `change` whenever the version differs
 * from the last one sent (starting from `v`), and `end` once the release is terminal.
 */
export function liveStream(c: Context, api: ReleaseApi, id: string) {
  let last = c.req.query("v") ?? "";
  return streamSSE(c, async (stream) => {
    let aborted = false;
    stream.onAbort(() => {
      aborted = true;
    });
    const until = Date.now() + LIVE_MAX_MS;
    while (!aborted && Date.now() < until) {
      // The mark (state, version, history count), not the record: one indexed query shared
      // by every tab watching this release (ReleaseApi.liveState).
      let live: { mark: string; state: string } | null;
      try {
        live = await api.liveState(id);
      } catch {
        await stream.writeSSE({ event: "error", data: "[dashboard] the store does not answer" });
        return;
      }
      if (!live) {
        await stream.writeSSE({ event: "error", data: `[dashboard] release ${id} does not exist` });
        return;
      }
      const v = live.mark;
      if (v !== last) {
        last = v;
        await stream.writeSSE({
          event: "change",
          data: JSON.stringify({ state: live.state, version: v }),
        });
      }
      if (TERMINAL_RELEASE_STATES.has(live.state as ReleaseRecord["release"]["state"])) {
        await stream.writeSSE({ event: "end", data: live.state });
        return;
      }
      await stream.sleep(LIVE_POLL_MS);
    }
  });
}

/**
 * The client side: on `change`, re-fetch this page and swap every `[data-part]` by id. The
 * stream is `data-events` of `#live` when set (the fleet page), else the release's.
 */
export const LIVE_SCRIPT = `(function(){
var live=document.getElementById("live");
if(!live||live.getAttribute("data-live")!=="1"||!window.EventSource||!window.fetch)return;
var src=live.getAttribute("data-events")||"/releases/"+encodeURIComponent(live.getAttribute("data-release"))+"/events",busy=false,again=false;
var es=new EventSource(src+(src.indexOf("?")<0?"?":"&")+"v="+encodeURIComponent(live.getAttribute("data-version")));
function refresh(){
if(busy){again=true;return}busy=true;
fetch(location.href,{credentials:"same-origin"}).then(function(r){return r.text()}).then(function(html){
var doc=new DOMParser().parseFromString(html,"text/html");
var parts=doc.querySelectorAll("[data-part]");
for(var i=0;i<parts.length;i++){var old=document.getElementById(parts[i].id);if(old)old.innerHTML=parts[i].innerHTML}
var nl=doc.getElementById("live");if(nl){live.setAttribute("data-version",nl.getAttribute("data-version"));if(nl.getAttribute("data-live")!=="1")es.close()}
}).catch(function(){}).then(function(){busy=false;if(again){again=false;refresh()}});}
es.addEventListener("change",refresh);
es.addEventListener("end",function(){es.close();refresh()});
})();`;

/**
 * A stream like `liveStream` for any page: polls `mark()` every `pollMs` (bounded by
 * `LIVE_MAX_MS`), emits `change` when it differs from the last one sent (starting from `v`),
 * and `error` when `mark` throws. Never ends by itself before its lifetime.
 */
export function markStream(c: Context, mark: () => Promise<string>, pollMs = LIVE_POLL_MS) {
  let last = c.req.query("v") ?? "";
  return streamSSE(c, async (stream) => {
    let aborted = false;
    stream.onAbort(() => {
      aborted = true;
    });
    const until = Date.now() + LIVE_MAX_MS;
    while (!aborted && Date.now() < until) {
      let v: string;
      try {
        v = await mark();
      } catch (err) {
        await stream.writeSSE({
          event: "error",
          data: `[dashboard] the fleet could not be read: ${(err as Error)?.message ?? String(err)}`,
        });
        return;
      }
      if (v !== last) {
        last = v;
        await stream.writeSSE({ event: "change", data: JSON.stringify({ version: v }) });
      }
      await stream.sleep(pollMs);
    }
  });
}
