/**
 * The main job end to end on a real Postgres server (the suite runs on both
 * stores). Each test gets a fresh database on BATON_TEST_DATABASE_URL.
 */
import { mainJobSuite } from "./main-job.suite.ts";

mainJobSuite("postgres");
