/** The folder of the built console (index.html, assets/), with a trailing slash; it may not be built yet. */
export declare const consoleDir: string;
