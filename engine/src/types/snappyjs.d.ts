/** Types of `snappyjs` (pure-JS Snappy, block format), which ships none. */
declare module "snappyjs" {
  /**
   * Decompresses a Snappy block. `maxLength` (bytes) is checked against the length the block
   * declares before anything is allocated.
   * @throws Error when the block is malformed or declares more than `maxLength` bytes.
   */
  export function uncompress<T extends Uint8Array | ArrayBuffer>(
    compressed: T,
    maxLength?: number,
  ): T;
  export function compress<T extends Uint8Array | ArrayBuffer>(uncompressed: T): T;
}
