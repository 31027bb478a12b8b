//! `openagenda-mcp-worker`: the single-use execute worker on its own.
//!
//! The server starts this program (when it sits next to the server binary)
//! instead of re-executing itself: it runs exactly the code of
//! `openagenda-mcp __execute-worker` ([`openagenda_mcp::worker::child`]) but
//! links none of the server's MCP, async or HTTP/TLS code, which makes every
//! worker start cheaper. It is not meant to be run by hand.

fn main() {
    let args: Vec<String> = std::env::args().collect();
    std::process::exit(openagenda_mcp::worker::main_with_args(&args));
}
