//! A stand-in for the netsweep binary, used by the lab's root tests to exercise the scenario
//! runner without the real measurement code:
//!
//! - `serve --bind ADDR --port PORT` listens and swallows connections until killed;
//! - `run ADDR:PORT [ARGS…] -o OUT --lab-meta META` connects once, writes OUT as JSON
//!   (target, args, whether META was readable) and exits 0; `--fake-sleep SECS` sleeps first,
//!   `--fake-exit CODE` exits with CODE;
//! - `scenario FILE OUT_DIR RUN_ID` runs a scenario with this binary as netsweep.

use std::io::Read;
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

fn value_after(args: &[String], key: &str) -> Option<String> {
    args.iter()
        .position(|a| a == key)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

fn serve(args: &[String]) -> i32 {
    let (Some(bind), Some(port)) = (value_after(args, "--bind"), value_after(args, "--port"))
    else {
        eprintln!("serve needs --bind and --port");
        return 2;
    };
    let listener = match TcpListener::bind(format!("{bind}:{port}")) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("bind {bind}:{port}: {e}");
            return 1;
        }
    };
    eprintln!("fake serve listening on {bind}:{port}");
    for mut c in listener.incoming().map_while(Result::ok) {
        std::thread::spawn(move || {
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = [0u8; 4096];
            while matches!(c.read(&mut buf), Ok(n) if n > 0) {}
        });
    }
    0
}

fn run(args: &[String]) -> i32 {
    let Some(target) = args.first().cloned() else {
        eprintln!("run needs ADDR:PORT");
        return 2;
    };
    if let Some(s) = value_after(args, "--fake-sleep").and_then(|s| s.parse().ok()) {
        std::thread::sleep(Duration::from_secs(s));
    }
    let connected = target
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(5)).ok())
        .is_some();
    let meta = value_after(args, "--lab-meta").unwrap_or_default();
    let meta_ok = std::fs::read_to_string(&meta)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .is_some();
    let doc = serde_json::json!({
        "fake": true,
        "target": target,
        "args": args,
        "connected": connected,
        "lab_meta_readable": meta_ok,
    });
    if let Some(out) = value_after(args, "-o") {
        if let Err(e) = std::fs::write(&out, doc.to_string()) {
            eprintln!("writing {out}: {e}");
            return 1;
        }
    }
    println!("fake run to {target}: connected={connected}");
    match value_after(args, "--fake-exit").and_then(|c| c.parse().ok()) {
        Some(code) => code,
        None if connected => 0,
        None => 1,
    }
}

fn scenario(args: &[String]) -> i32 {
    let (Some(file), Some(out), Some(id)) = (args.first(), args.get(1), args.get(2)) else {
        eprintln!("scenario needs FILE OUT_DIR RUN_ID");
        return 2;
    };
    let s = match netsweep_lab::Scenario::load(file.as_ref()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{e}");
            return e.exit_code();
        }
    };
    let exe = match std::env::current_exe() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("{e}");
            return 1;
        }
    };
    let mut opts = netsweep_lab::RunOptions::new(&exe, out.as_ref());
    opts.run_id = Some(id.clone());
    match netsweep_lab::run_scenario_with(&s, &opts, |p| {
        if let netsweep_lab::Progress::LabUp(_) = p {
            println!("lab up");
        }
    }) {
        Ok(o) => o.exit_code(),
        Err(e) => {
            eprintln!("{e}");
            e.exit_code()
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let code = match args.first().map(String::as_str) {
        Some("serve") => serve(&args[1..]),
        Some("run") => run(&args[1..]),
        Some("scenario") => scenario(&args[1..]),
        _ => {
            eprintln!("usage: fake_netsweep serve|run|scenario …");
            2
        }
    };
    std::process::exit(code);
}
