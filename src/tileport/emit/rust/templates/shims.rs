// Op bindings ("shims") for gaps in cutile 0.5.0, read by tileport.emit.rust.lowering (SHIMS): each is
// copied, as written here, into a generated module whose code calls its function, and is named by it.
// One blank line separates them; none holds a blank line.

    /// `divf` with `rounding<full>` (cutile 0.5.0's `divf` has no `Full` spelling).
    #[cuda_tile::op(name = "cuda_tile.divf", since = "V13_2", params = ["lhs", "rhs"], static_params = ["rounding={NearestEven: rounding_mode=#cuda_tile.rounding<nearest_even>, Approx: rounding_mode=#cuda_tile.rounding<approx>, Full: rounding_mode=#cuda_tile.rounding<full>}", "ftz={Enabled: flush_to_zero=unit}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn divf_full<E: ElementType, const S: [i32; N], R: rounding::Mode, F: ftz::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        rounding: R,
        ftz: F,
    ) -> Tile<E, S> {
        unreachable!()
    }

    /// `trunci` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.trunci", since = "V13_2", params = ["from"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn trunci_fixed<EIn: ElementType, EOut: ElementType, const S: [i32; N], O: overflow::Mode>(
        from: Tile<EIn, S>,
        overflow: O,
    ) -> Tile<EOut, S> {
        unreachable!()
    }

    /// `shli` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.shli", since = "V13_2", params = ["lhs", "rhs"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn shli_fixed<E: ElementType, const S: [i32; N], O: overflow::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        overflow: O,
    ) -> Tile<E, S> {
        unreachable!()
    }

    /// `muli` that writes its `overflow` attribute (cutile 0.5.0 omits it for `overflow::None`).
    #[cuda_tile::op(name = "cuda_tile.muli", since = "V13_2", params = ["lhs", "rhs"], static_params = ["overflow={None: overflow=#cuda_tile.overflow<none>, NoSignedWrap: overflow=#cuda_tile.overflow<no_signed_wrap>, NoUnsignedWrap: overflow=#cuda_tile.overflow<no_unsigned_wrap>, NoWrap: overflow=#cuda_tile.overflow<no_wrap>}"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn muli_fixed<E: ElementType, const S: [i32; N], O: overflow::Mode>(
        lhs: Tile<E, S>,
        rhs: Tile<E, S>,
        overflow: O,
    ) -> Tile<E, S> {
        unreachable!()
    }

    /// `load_ptr_tko` whose padding operand is a whole tile, as cuTile Python passes it (the built-in
    /// takes a scalar and cannot broadcast it at rank >= 2).
    #[cuda_tile::op(name = "cuda_tile.load_ptr_tko", since = "V13_2", params = ["source"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub unsafe fn load_ptr_tko_tpad<
        E: ElementType,
        P: PointerTo<E>,
        const S: [i32; N],
        O: ordering::LoadMode,
        Sc: scope::Mode,
        const CYCLES: i32,
    >(
        source: PointerTile<P, S>,
        memory_ordering: O,
        memory_scope: Option<Sc>,
        mask: Option<Tile<bool, S>>,
        padding_value: Option<Tile<E, S>>,
        token: Option<Token>,
        latency: Latency<CYCLES>,
    ) -> (Tile<E, S>, Token) {
        unreachable!()
    }

    /// A constant written as an f32 literal but typed by its result (f16/bf16/generic element types).
    #[cuda_tile::op(name = "cuda_tile.constant", since = "V13_2", params = [], attribute_params = ["value:dense"])]
    #[cuda_tile::variadic_op(N = 6)]
    pub fn constant_lit<E: ElementType, const S: [i32; N]>(value: f32, shape: Shape<S>) -> Tile<E, S> {
        unreachable!()
    }
