fn main() {
    let dir = std::env::args().nth(1).unwrap();
    let t = std::time::Instant::now();
    let r = cvo::release::load(std::path::Path::new(&dir), &Default::default()).unwrap();
    println!(
        "{} manifests, {} excluded, {:?}",
        r.manifests.len(),
        r.excluded.len(),
        t.elapsed()
    );
    for d in &r.diagnostics {
        println!("{d}");
    }
}
