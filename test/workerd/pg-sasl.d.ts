/** pg's SCRAM helpers (untyped in @types/pg), as test/workerd/unreachable-entry.ts calls them. */
declare module "pg/lib/crypto/sasl.js" {
  interface Session {
    mechanism: string;
    clientNonce: string;
    response: string;
    message: string;
  }
  const sasl: {
    startSession(mechanisms: string[], stream?: unknown): Session;
    continueSession(
      session: Session,
      password: string,
      serverData: string,
      stream?: unknown,
    ): Promise<void>;
  };
  export default sasl;
}
