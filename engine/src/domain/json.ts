/** A JSON value: what a store column, a request body or an evidence field holds once parsed. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
