import { runPost } from "./post-main.ts";

void runPost();
