/**
 * Secret masking as the runner does it for a step's log: values registered with
 * `::add-mask::<value>` on stdout (what `core.setSecret` prints), and the secrets passed as
 * inputs, are replaced by `***` in everything written afterwards. Multi-line secrets are
 * masked line by line too (an SSH key is printed one line at a time).
 */

/** Shared set of masked values for one run. */
export class MaskSet {
  private readonly values = new Set<string>();

  /** Registers a secret; each of its lines is masked as well. Short values (< 4 chars) are ignored. */
  add(secret: string): void {
    for (const v of [secret, ...secret.split(/\r?\n/)]) {
      const t = v.trim();
      if (t.length >= 4) this.values.add(t);
    }
  }

  /** `text` with every registered value replaced by `***`, longest first. */
  apply(text: string): string {
    let out = text;
    for (const v of [...this.values].sort((a, b) => b.length - a.length)) {
      out = out.split(v).join("***");
    }
    return out;
  }
}

/** Decodes a workflow command's escaped data (`%25`, `%0D`, `%0A`; @actions/core `escapeData`). */
function unescapeData(s: string): string {
  return s.replace(/%0D/g, "\r").replace(/%0A/g, "\n").replace(/%25/g, "%");
}

/**
 * A line-buffered writer: consumes `::add-mask::` commands (stdout only) and writes masked
 * lines to `sink`. Call `end()` to flush a last line without a newline.
 */
export class MaskingLineWriter {
  private pending = "";

  constructor(
    private readonly masks: MaskSet,
    private readonly sink: (line: string) => void,
    private readonly readsCommands: boolean,
  ) {}

  write(chunk: Buffer | string): void {
    this.pending += chunk.toString();
    let nl = this.pending.indexOf("\n");
    while (nl >= 0) {
      this.line(this.pending.slice(0, nl));
      this.pending = this.pending.slice(nl + 1);
      nl = this.pending.indexOf("\n");
    }
  }

  end(): void {
    if (this.pending !== "") this.line(this.pending);
    this.pending = "";
  }

  private line(raw: string): void {
    const line = raw.replace(/\r$/, "");
    const m = this.readsCommands ? /^::add-mask::(.*)$/.exec(line) : null;
    if (m) {
      this.masks.add(unescapeData(m[1] ?? ""));
      return;
    }
    this.sink(`${this.masks.apply(line)}\n`);
  }
}
